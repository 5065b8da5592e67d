"""flagbot in Slack: renderer, RBAC, thread reporter, app, handlers, and a local Slack stand-in."""
