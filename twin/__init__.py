"""twin: a simulation-first digital twin of a six-axis arm.

Importing ``twin`` registers the Gymnasium environment ids ``twin.env.ENV_IDS``.
"""

from twin.env.registration import register_envs as _register_envs

_register_envs()
