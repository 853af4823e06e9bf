"""Process entry points for background work, each `argv -> one library call`: the library in
`dcpm/` never imports this package."""
