"""`dcpm mcp`: the memory over the Model Context Protocol, a surface on the `Memory` contract."""
