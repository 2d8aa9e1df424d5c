"""Process and timing utilities the nodes and the service layer share, without ROS.

Modules: ``heap`` (glibc settings that keep a long-running learner's RSS flat), ``stage_times`` (wall
and CPU time per step of a node's frame path), ``rate_limit`` (a token bucket on the caller's clock:
predictions per second, fleet and page requests), ``backbone_turns`` (camera frames first at a shared
backbone, batch work between them), ``input_grace`` (an input the first frames came without is
missing only after a few frames and seconds), ``per_sender`` (entries remembered per sender, each
within its own quota: one sender's flood pushes out only its own). They import nothing else from
the package, so every layer may use them.
"""
