"""Icons and themes shipped with the app."""
