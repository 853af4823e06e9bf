"""Each prompt is a small module: its template text and the Pydantic model of its answer."""
