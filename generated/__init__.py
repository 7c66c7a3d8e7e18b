"""Code and LaTeX emitted by `resprop derive`; never edit by hand (only this file is hand-written)."""
