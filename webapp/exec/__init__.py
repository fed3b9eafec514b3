"""A shell in a container, from a pod's panel: the page's WebSocket bridged to the API
server's exec WebSocket, directly or through the agent's tunnel (docs/operate.md, "A shell
in a container").

`page_socket` serves the page's socket and bridges it, `request` checks what a page asks and the
keys that must all turn before a shell opens, `upstream` is the API server's end (and the
agent's, tunnel/exec_agent.py), `channels` the exec channel protocols both ends speak,
`sessions` bounds the shells of a server process, `record` writes each one in Activity.
"""
