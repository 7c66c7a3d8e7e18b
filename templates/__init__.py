"""Jinja2 templates of the generated kernels, the LaTeX export and the report page (read with importlib.resources)."""
