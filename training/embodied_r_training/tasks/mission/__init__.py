"""Memory questions about a whole mission (``embodied-r synth --mission``), one module per kind.

Every question's window is the whole mission; what it asks about lies in a few far-apart intervals (the
*evidence*: for retrieval recall@k). Objects are named as the ground truth names them ("red chair"); a name
may stand for objects in several rooms (:mod:`embodied_r_training.synth.mission` plants such names on
purpose), and the first / last sighting of a name is that of any of its objects. Each kind's module gives
its rules and what its solver reads; :mod:`.context` what the generators share, :mod:`.reading` what the
solvers share, :mod:`.oracle` the mission oracle.
"""
