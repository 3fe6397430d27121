"""The steps a Run is made of (adr/0031), one module each: pre-flight, the branch choice, the
Lease and its checks, kept work, the Claim, the Worktree, the brief, the session, the takeover,
the Repair loop, the review reply, the finish, the salvage and the Base fix. A step takes the
frozen context of the point it runs at (``runs.scope``) and only the collaborators it uses;
steps never import each other, and only the Run kinds (``runs.delivery``, ``runs.architect.run``)
import them."""
