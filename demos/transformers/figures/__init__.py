"""The page's figures, one module per demo module: a function from a demo's result to a plotly figure."""
