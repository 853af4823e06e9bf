"""The API contract: wire models (`models/`), the `Memory` protocol every surface uses
(`protocol`), and the typed HTTP client that implements it against a daemon (`client`)."""
