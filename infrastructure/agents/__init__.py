"""Other agents' session stores as pentrace sessions (design decision 14, issue #28).

Claude Code, Codex CLI, OpenCode and Gemini CLI keep their sessions in their own
stores.  This package reads them in place (never writing into them) and writes
each foreign session into the data root as an ordinary pentrace trace, every
record carrying the source line it came from (ADR 0095), so every reader,
store and surface works on it and pentrace's copy outlives the agent's.

* :mod:`.reading`: source items (lines read in bounded memory, JSON values),
  discovery, and the small helpers that normalise what the agents write;
* :mod:`.core`: building records with their source, the usage book, the
  report; the mapping base every agent shares;
* :mod:`.state`: the durable cursors and mapping state (ADR 0096);
* :mod:`.importer`: discovery, the import pass and the live follow pass;
* one module per agent: :mod:`.claude`, :mod:`.codex`, :mod:`.opencode`,
  :mod:`.gemini`.

``docs/agents.md`` says per agent where pentrace looks, what it maps, what it
skips and how its usage is counted.
"""
