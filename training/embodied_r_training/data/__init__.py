"""Data sets from bags and videos: reading bags, ``prepare``, ``import-video``, the record schema."""
