"""Headless-safe rendering: ``human`` without a display falls back to ``rgb_array`` with a
warning (never the PyBullet GUI, which ends the process there); ``check_env`` with its default
arguments passes; the goal is drawn in ``rgb_array`` frames."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from twin.env import ENV_IDS, GOAL_ENV_IDS
from twin.env.core import RENDER_HEIGHT, RENDER_WIDTH, display_available


@pytest.fixture
def headless(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert not display_available() or not __import__("sys").platform.startswith("linux")


@pytest.mark.parametrize("env_id", ENV_IDS + GOAL_ENV_IDS)
def test_check_env_with_default_arguments_passes_headless(env_id, headless):
    with pytest.warns(RuntimeWarning, match="render_mode='human' needs a display"):
        check_env(gym.make(env_id))  # makes a 'human' env too: the render check runs


def test_human_without_display_falls_back_to_rgb_array(headless):
    with pytest.warns(RuntimeWarning, match="falling back to render_mode='rgb_array'"):
        env = gym.make("twin/Reach-v0", render_mode="human")
    with env:
        assert env.unwrapped.render_mode == "rgb_array"
        assert env.unwrapped.robot.engine.gui is False
        env.reset(seed=0)
        frame = env.render()
    assert frame.shape == (RENDER_HEIGHT, RENDER_WIDTH, 3) and frame.dtype == np.uint8


def _red(frame: np.ndarray) -> np.ndarray:
    """Pixels of the goal marker's colour (0.9, 0.1, 0.1), shaded: (rows, cols) indices."""
    f = frame.astype(int)
    return np.argwhere((f[..., 0] > 120) & (f[..., 1] < 60) & (f[..., 2] < 60))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_goal_marker_is_drawn_and_follows_the_goal(env_id):
    with gym.make(env_id, render_mode="rgb_array") as env:
        env.reset(seed=0)
        first = _red(env.render())
        env.reset(seed=5)
        second = _red(env.render())
    with gym.make(env_id) as plain:  # no render mode: no marker body is added
        plain.reset(seed=0)
        assert not any(name.startswith("marker:") for name in plain.unwrapped.robot.engine.bodies)
    assert len(first) > 20 and len(second) > 20, (len(first), len(second))
    assert np.abs(first.mean(axis=0) - second.mean(axis=0)).max() > 3.0  # pixels


def test_press_frame_shows_the_table_surface():
    with gym.make("twin/Press-v0", render_mode="rgb_array") as env:
        env.reset(seed=0)
        frame = env.render()
        table = env.unwrapped.robot.scene_bodies
    assert len(table) > 0
    assert (frame.min(axis=2) < 200).mean() > 0.05  # the table covers a good share of the frame
