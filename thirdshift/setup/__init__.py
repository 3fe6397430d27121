"""``thirdshift setup``: a repository made ready for thirdshift in one command.

``config_file`` writes the commented configuration file (or edits one in place, keeping what a
person wrote), as pure text rules; ``labels`` names the labels thirdshift uses and makes those a
repository lacks, through a small port (``LabelWrites``) the GitHub adapter, the in-process fake
and the stand-in all serve. The composition root (``thirdshift.bootstrap.setup``) runs both and
then the doctor's checks.
"""

from thirdshift.setup.config_file import config_text, with_repository
from thirdshift.setup.labels import LabelSpec, LabelWrites, make_labels, thirdshift_labels

__all__ = [
    "LabelSpec",
    "LabelWrites",
    "config_text",
    "make_labels",
    "thirdshift_labels",
    "with_repository",
]
