"""Reports of analysed results: the self-contained HTML report (html.py) and
figures for papers (figures.py, matplotlib)."""
