/*
 * emdb._torch_bags - emdb.torch.EmbeddingBag's training step in C++: the
 * pooled Pull as forward and the pooled Push as its autograd node, so that
 * neither forward nor backward runs Python code (docs/python.md,
 * "Benchmark").
 *
 * Design.  emdb.torch's forward, for a module with the end in its offsets
 * and neither padding nor weights, calls pull_bags(conn, client, ids,
 * offsets, table, pool, dim) first: where IDs and offsets are 1-D
 * contiguous int64 CPU tensors and grad mode is on (checked here, in a
 * fraction of what the same checks cost in Python), it makes the output, makes the C call with the GIL released (as cffi does) and hangs
 * a PushBags node on the output (torch::autograd::Node, no next edges: the
 * table has no torch parameter).  The engine runs PushBags::apply without
 * the GIL: the pooled Push of the output's gradient, the IDs and offsets
 * kept alive by the node as tensors.  Everything else in emdb.torch (the
 * other forms of input, weights, inference, the Python Function used
 * where this module is not built) stays in Python.
 *
 * This module links with no emdb library: a Conn carries the handle and
 * the addresses of the C functions of the cffi module that opened it
 * (emdb._native or emdb._native_mem, each with its own copy of the client),
 * given by Python.  Client.close() clears the Conn's handle first, so a
 * backward that outlives its client raises ValueError ("closed") instead
 * of using a freed handle, as the Python Function does; the node also
 * holds a reference to the Python Client, as the Python Function's ctx
 * does, released under the GIL.
 *
 * Errors: a call that fails raises the emdb.Error of its code and of the
 * message of emdb_client_last_error() (per thread, read right after the
 * call, on the calling thread), made by emdb.errors.error: the same
 * exception as the Python path, from forward through pybind11, from
 * backward through torch's python_error, which the autograd engine
 * carries back to the caller of backward().
 */
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

extern "C" {
#include "emdb/client.h"
}

namespace py = pybind11;

namespace {

using PullBagsFn = decltype(&emdb_client_pull_bags);
using PushBagsFn = decltype(&emdb_client_push_bags);
using LastErrorFn = decltype(&emdb_client_last_error);

/* One Client's handle and the C functions of its cffi module. */
struct Conn {
	std::atomic<emdb_client *> handle;
	PullBagsFn pull;
	PushBagsFn push;
	LastErrorFn last_error;

	Conn(uintptr_t h, uintptr_t pull_fn, uintptr_t push_fn, uintptr_t err_fn)
		: handle(reinterpret_cast<emdb_client *>(h)),
		  pull(reinterpret_cast<PullBagsFn>(pull_fn)),
		  push(reinterpret_cast<PushBagsFn>(push_fn)),
		  last_error(reinterpret_cast<LastErrorFn>(err_fn))
	{
	}

	/* Called by Client.close() before it frees the handle. */
	void close() { handle.store(nullptr); }
};

/* Set the Python error for a failed call (GIL held): emdb.errors.error(rc,
 * message), or ValueError for a closed client (rc 0). */
void set_error(const Conn &c, int rc)
{
	if (rc == 0) {
		PyErr_SetString(PyExc_ValueError, "emdb.Client is closed");
		return;
	}
	const char *m = c.last_error();
	py::object msg = py::reinterpret_steal<py::object>(
		PyUnicode_DecodeUTF8(m ? m : "", m ? (Py_ssize_t)std::strlen(m) : 0, "replace"));
	if (!msg)
		return;
	py::object err = py::module_::import("emdb.errors").attr("error")(rc, msg);
	PyErr_SetObject(reinterpret_cast<PyObject *>(Py_TYPE(err.ptr())), err.ptr());
}

/* A strong reference to a Python object that a node may drop without the
 * GIL (the engine frees nodes on its own threads). */
struct PyRef {
	PyObject *obj;
	explicit PyRef(PyObject *o) : obj(o) { Py_XINCREF(o); }
	PyRef(const PyRef &) = delete;
	PyRef &operator=(const PyRef &) = delete;
	~PyRef()
	{
		if (obj && Py_IsInitialized()) {
			py::gil_scoped_acquire gil;
			Py_DECREF(obj);
		}
	}
};

/* backward of pull_bags: the pooled Push of the bags' gradient. */
struct PushBags : public torch::autograd::Node {
	std::shared_ptr<Conn> conn;
	PyRef client;
	at::Tensor ids, offsets;
	uint32_t table;
	emdb_pool pool;
	uint32_t dim;

	PushBags(std::shared_ptr<Conn> c, PyObject *cl, at::Tensor i, at::Tensor o, uint32_t t,
		 emdb_pool p, uint32_t d)
		: conn(std::move(c)), client(cl), ids(std::move(i)), offsets(std::move(o)), table(t),
		  pool(p), dim(d)
	{
	}

	std::string name() const override { return "emdb::PushBags"; }

	torch::autograd::variable_list apply(torch::autograd::variable_list &&grads) override
	{
		int64_t n = ids.numel(), bags = offsets.numel() - 1;
		if (n == 0)
			return {};
		at::Tensor g = grads[0];
		if (!g.defined())
			g = at::zeros({bags, (int64_t)dim}, at::kFloat);
		else if (g.scalar_type() != at::kFloat || !g.is_cpu() || !g.is_contiguous())
			g = g.detach().to(at::kCPU, at::kFloat).contiguous();
		emdb_client *h = conn->handle.load();
		int rc = h ? conn->push(h, table, reinterpret_cast<const uint64_t *>(ids.data_ptr()),
					(size_t)n,
					reinterpret_cast<const uint64_t *>(offsets.data_ptr()),
					(size_t)bags, pool, dim, g.data_ptr<float>())
			   : 0;
		if (h && rc == 0)
			return {};
		python_error e;
		{
			py::gil_scoped_acquire gil;
			set_error(*conn, rc);
			e.persist();
		}
		throw e;
	}
};

/* The fast path's form: a 1-D contiguous int64 CPU tensor. */
bool fits(const at::Tensor &t)
{
	return t.scalar_type() == at::kLong && t.dim() == 1 && t.is_cpu() && t.is_contiguous();
}

/* forward: the pooled Pull into a new (bags, dim) float32 tensor whose
 * grad_fn is a PushBags; None, with nothing done, where input and offsets
 * are not both tensors of the fast path's form or grad mode is off (the
 * caller takes its Python path).  The engine checks the offsets. */
py::object pull_bags(const std::shared_ptr<Conn> &conn, py::handle client, py::handle input,
		     py::handle offs, uint32_t table, int pool, uint32_t dim)
{
	if (!THPVariable_Check(input.ptr()) || !THPVariable_Check(offs.ptr()) ||
	    !at::GradMode::is_enabled())
		return py::none();
	const at::Tensor &ids = THPVariable_Unpack(input.ptr());
	const at::Tensor &offsets = THPVariable_Unpack(offs.ptr());
	if (!fits(ids) || !fits(offsets) || offsets.numel() < 1)
		return py::none();
	int64_t n = ids.numel(), bags = offsets.numel() - 1;
	at::Tensor out = n ? at::empty({bags, (int64_t)dim}, at::kFloat)
			   : at::zeros({bags, (int64_t)dim}, at::kFloat);
	if (n) {
		emdb_client *h = conn->handle.load();
		int rc = 0;
		if (h) {
			py::gil_scoped_release nogil;
			rc = conn->pull(h, table, reinterpret_cast<const uint64_t *>(ids.data_ptr()),
					(size_t)n,
					reinterpret_cast<const uint64_t *>(offsets.data_ptr()),
					(size_t)bags, (emdb_pool)pool, dim, out.data_ptr<float>());
		}
		if (!h || rc != 0) {
			set_error(*conn, rc);
			throw py::error_already_set();
		}
	}
	auto node = std::shared_ptr<PushBags>(
		new PushBags(conn, client.ptr(), ids, offsets, table, (emdb_pool)pool, dim),
		torch::autograd::deleteNode);
	torch::autograd::create_gradient_edge(out, std::move(node));
	return py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(out)));
}

} // namespace

PYBIND11_MODULE(_torch_bags, m)
{
	m.doc() = "emdb.torch's pooled Pull and Push as a C++ autograd node (internal)";
	py::class_<Conn, std::shared_ptr<Conn>>(m, "Conn")
		.def(py::init<uintptr_t, uintptr_t, uintptr_t, uintptr_t>())
		.def("close", &Conn::close);
	m.def("pull_bags", &pull_bags);
}
