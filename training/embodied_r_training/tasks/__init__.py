"""Question tasks: each one registered object (:class:`.task.QuestionTask`) holding its template, its
generator (scene -> questions, for ``embodied-r synth``) and its solver (prompt -> reasoning, answer, for the
oracle). :mod:`.registry` lists them; docs/adding-a-task.md says how to add one.

Scene tasks (VSI-Bench style, plus the robot's own motion), one module each (ego_motion: three):

==================== ======== ====================================================================
task                 forms    ground truth
==================== ======== ====================================================================
appearance_order     mc       order of first sighting (>= 0.2 % of the image) of 3 objects
relative_direction   mc       standing at A facing B: C's quadrant (front/back x left/right)
relative_distance    mc       which of 3-4 objects has its centre closest to A's centre
object_count         num      objects of one category seen in the window
abs_distance         mc, num  distance between two objects' centres (m)
object_size          mc, num  an object's longest dimension (m)
room_size            mc, num  the room's floor area (m^2, indoor only)
route                mc       the turns between two walk (or flight) legs, from near A to near B
ego_distance         mc, num  distance the camera travelled along its path in the window (m)
ego_turn             mc       net turn over the window (direction and rough angle)
ego_altitude         mc, num  altitude change over the window (outdoor: direction and metres)
==================== ======== ====================================================================

Rules that keep every answer unambiguous: an object never seen in a question's window is never named in
it; horizontal geometry is used for directions; a question is skipped rather than asked when its answer
is near a decision boundary (quadrant boundaries within 15 deg, a runner-up within 15 % of the closest,
appearance times within 0.5 s, a category member that is only barely visible, turn angles near the
labels' limits). Windows that do not span the whole clip start and end on the key-frame candidate grid
(``candidate_fps`` per second from the first frame), so the key frames cover them from end to end.

Rules that keep options from giving the answer away (a reader who sees only the options should do no
better than chance, :mod:`embodied_r_training.eval.baselines`): a numeric answer's rank among its sorted
options is uniform (neighbouring options 25-60 % apart, all inside a plausible range of the task,
:class:`.amounts.Distractors`), and so is the amount's in ego_turn and ego_altitude options, whose
directions are drawn at random; route distractors are turn sequences drawn as true routes are distributed,
not edits of the truth (the one option a single edit away from all others would be the truth). Counts are
asked in numeric form only, as VSI-Bench does: most categories are seen once, and no set of count options
hides that from a blind reader (one who always picks "1" would be right in most questions). Balancing the
correct letters and the answers over a scene's questions is the driver's
(:mod:`embodied_r_training.synth.questions`).

Mission tasks (memory questions over a whole mission): :mod:`.mission`.
"""
