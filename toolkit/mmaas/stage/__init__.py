"""What runs inside the builder stage (`python -m mmaas.stage`): compile with the back end's
compiler, check over the profile, run the gates, hash, write the model directory; stamp a
built engine for a model. Imports only the foundation and the back-end registry (which
gives it the back end's builder part)."""
