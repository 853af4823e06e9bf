"""dcpm's own HTTP routes, one module per resource."""
