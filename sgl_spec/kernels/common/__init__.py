"""Device helpers shared by several kernel ops (launch flags, TMA row views, packed-word decoding)."""
