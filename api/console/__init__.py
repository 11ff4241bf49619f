"""The web console's static files (HTML, CSS, JavaScript modules), served by the API."""
