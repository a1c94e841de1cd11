"""``graphgen.ray``: translate a dataset on a Ray cluster (``pip install graphgen[ray]``).

The public home of :mod:`graphgen.deploy.ray`, whose docstring shows the use.
"""

from graphgen.deploy.ray import TranslateBatch, translate, translate_text_file

__all__ = ["TranslateBatch", "translate", "translate_text_file"]
