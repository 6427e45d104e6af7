"""The speculative worker: draft passes, verification, acceptance and when to speculate."""
