"""The notebook: one op document — its model, its files on disk, undo, problems, the proofs' freshness, the
notebook of cells and the view that holds them, the New op dialog."""
