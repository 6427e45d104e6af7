"""Study-only features, imported only when their flags are given."""
