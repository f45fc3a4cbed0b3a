"""The HTTP edge: Host/Origin guard, security headers, auth, request values and error bodies."""
