"""Notifications: one message per Run end (and per pass-over for permissions) to each configured
target, scrubbed, never failing a Run.

``message`` holds the rules (the JSON body, its HMAC-SHA256 signature, the text for chat and
e-mail), ``targets`` the real adapters (a signed webhook over HTTP, Apprise for chat and e-mail)
and a scripted one, and ``notifier`` the Notifier a Run and the daemon are given
(``TargetNotifier``): it scrubs, sends to every target and turns a failed send into a warning.
"""

from thirdshift.notify.message import SIGNATURE_HEADER, body_of, signature, text_of
from thirdshift.notify.notifier import TargetNotifier
from thirdshift.notify.targets import AppriseTarget, ScriptedTarget, Target, WebhookTarget

__all__ = [
    "SIGNATURE_HEADER",
    "AppriseTarget",
    "ScriptedTarget",
    "Target",
    "TargetNotifier",
    "WebhookTarget",
    "body_of",
    "signature",
    "text_of",
]
