"""dcpm: a long-term memory daemon for LLM assistants (DCPM: Dual-Process Cognitive Memory)."""

__version__ = "0.1.0"


def __getattr__(name: str):  # lazy: `import dcpm` stays cheap for the CLI's --help
    if name == "Client":
        from dcpm.api.client import Client

        return Client
    raise AttributeError(name)
