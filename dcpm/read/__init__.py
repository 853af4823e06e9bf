"""The read path (DCPM 2.4), never an LLM: `query` encodes the query (E, or E + E_θ with the
associative adapter), `search` runs the hybrid ANN and hydrates hits with their supersedes
chains, `fusion` combines dense and lexical scores, `surfacing` brings up graph nodes whose
evidence contains a hit, and `context_block` renders the token-budgeted block for the prompt."""
