"""Runs and fits on disk, one mechanism for all: a JSON commit of plain data replaced atomically with the one
before it kept (:mod:`.commit`), a writer's lock (:mod:`.lock`), digests, and ``daskgp repair``. The chains'
draws (:mod:`.draws`, zarr) and every sparse family's fit checkpoint (:mod:`.fits`) are stores of it."""
