"""What every HTTP route shares: Conjure error bodies and streamed, size-limited request bodies."""
