"""The reference pages in docs/ that the code renders, one module per page.

:mod:`scripts.generate_docs` writes them (or checks them, ``--check``);
each page is rendered from the live objects that define what it lists, and
its prose is divided into the page's sections.
"""
