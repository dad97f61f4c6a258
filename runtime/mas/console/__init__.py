"""The web console: the agency as a live graph, its Applications, agents and a chat with each.

One Starlette server (:mod:`~mas.console.app`) renders every page from one
:class:`~mas.console.sources.Source`, which says what Applications there are and where their
agents answer:

- :mod:`~mas.console.document_source`: a laptop, ``mas-ctl console -f app.yaml``; the document
  is read once, each deployed agent's AgentCard is fetched now and then to tell its edges;
- :mod:`~mas.console.cluster_source`: a cluster, ``mas-ctl console --cluster``; Applications
  and their Events are watched through the API server (the only module that imports
  ``kubernetes``, lazily);
- :mod:`~mas.console.views`: what both give, plain dataclasses;
- :mod:`~mas.console.graph`: the agency laid out and drawn as SVG, server-side;
- :mod:`~mas.console.pages` and :mod:`~mas.console.html`: the HTML, every string escaped;
- :mod:`~mas.console.agents`: the calls to an agent (card, tasks, a chat turn), on
  :mod:`mas.ctl.client`;
- :mod:`~mas.console.security`: who may open the console, and the headers of every answer.

The browser talks only to the console; the console calls the agents.
"""
