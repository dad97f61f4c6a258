"""Generators of the references in ``docs/reference/``, one module per page.

Each module renders its page from the source of truth (the Application models, the chart's
``values.yaml``, ``mas-ctl``'s argument parser) and has the same command line as
:mod:`mas.infra.crd`: ``python -m mas.reference.MODULE`` prints the page, ``--check FILE``
exits 1 when the committed ``FILE`` differs (``scripts/check`` runs the three checks,
``make reference`` writes the three pages). Nothing else imports this package.
"""
