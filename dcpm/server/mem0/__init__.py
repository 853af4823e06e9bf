"""The Mem0 platform API, for applications built on `mem0ai`'s MemoryClient: wire models,
pure mapping onto dcpm's shapes, and the routes."""
