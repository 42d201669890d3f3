"""Exceptions of the F/T sensor services, one class per error of the reference driver
(``docs/reference/ft-services.md``: ``e_nodev``, ``e_baddev``, ``e_inval``,
``e_notconn``, ``e_sys``)."""

from __future__ import annotations


class FtError(Exception):
    """Base class of every F/T service error."""


class NoDeviceError(FtError):
    """The robot has no F/T sensor device (``e_nodev``)."""


class BadDeviceError(FtError):
    """The device did not answer as a Bota-style sensor should (``e_baddev``)."""


class InvalidArgumentError(FtError, ValueError):
    """An argument is out of range or malformed (``e_inval``); the message says what was expected."""


class NotConnectedError(FtError):
    """The service is not connected; call ``connect()`` first (``e_notconn``)."""


class FtSystemError(FtError):
    """A system call failed (``e_sys``): ``code`` is the errno (or -1), ``what`` the reason."""

    def __init__(self, code: int, what: str) -> None:
        super().__init__(f"[{code}] {what}")
        self.code = code
        self.what = what
