"""Layer 6 (client): sessions that run graphs in-process or through a remote master."""
