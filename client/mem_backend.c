/*
 * mem_backend.c - plugs the in-process mem:// transport (mem.c) into the
 * client library when a program links libemdb_client_mem.
 *
 * The client library itself links no engine (it is what a trainer that
 * speaks tcp:// links), so emdb_client_connect cannot name mem.c: it calls
 * through cl_mem_backend, which this file's constructor sets.  A static
 * link keeps this object because emdb_client_mem's CMake target (and
 * anyone linking by hand: -Wl,--undefined=cl_mem_backend_linked) asks for
 * cl_mem_backend_linked; this object pulls mem.c in turn.
 *
 * Invariants:
 *   1. cl_mem_backend is written once, before main, and only read after.
 */
#include "client/client_int.h"

/* The symbol a static link asks for to keep this object. */
const char cl_mem_backend_linked[] = "mem://";

__attribute__((constructor)) static void mem_backend_register(void)
{
	cl_mem_backend = cl_mem_open;
}
