"""The look and the controls every room shares: the style sheet, light and dark themes, input frames, code
editors and highlighting, panels that fit, the wheel guard, the plots' Export button. Imports no other room."""
