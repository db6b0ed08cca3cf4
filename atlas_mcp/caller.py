"""Where the HTTP transport leaves the caller it verified: two keys on the ASGI scope.

The bearer middleware (``mcp/http.py``) sets them once per request, from the credential, never
from the request's content; the tools, the inspector and consolidation's sampling read them.
"""

SCOPE_USER_KEY = "atlas.user"  # the user whose memories this request may touch
SCOPE_GRANT_KEY = "atlas.grant"  # the credential's ``scopes.Grant``: user, scopes, credential name
