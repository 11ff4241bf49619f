"""AG-UI 1.0 (the Agent–User Interaction protocol): `POST /ag-ui/{kind}` (router), the mapping of
run events, requests and snapshots to AG-UI events (mapping), and one AG-UI run's event stream
(stream). See docs/ag-ui.md."""
