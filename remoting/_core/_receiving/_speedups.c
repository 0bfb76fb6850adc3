/* The transport's per-request kernels in C: the compiled fast path of the receiving side.
 *
 * Each function here is a fast path of a Python function that stays the specification:
 *
 *   first_step   remoting/_core/_receiving/_first_step.py   first_step
 *
 * first_step runs an async processor's coroutine up to its first suspension in a context of
 * its own, as the Python twin does with ``context.run(coro.send, None)``, but without the
 * bound method, the context's call frame and, above all, the StopIteration that a coroutine
 * finishing at once (most processors) raises and the caller catches: PyIter_Send gives the
 * return value directly. Whatever the coroutine raises propagates unchanged, as in Python.
 * An object that is not a native coroutine or generator takes its ``send`` method, as the
 * Python twin does. tests/remoting/test_compiled_first_step_agrees_with_python.py holds the
 * two to the same results with hypothesis.
 *
 * Built by hatch_build.py beside codec/_speedups.c; loaded by _native.py beside it through
 * codec/_native.py's load_extension (never under TRIO_REMOTING_PURE_PYTHON, never stale).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 ""
#endif

/* (done, value): done is True when the coroutine returned (value: what it returned), False
 * when it suspended (value: what it yielded, a trio trap). */
static PyObject *
done_value(int done, PyObject *value)
{
    PyObject *pair = PyTuple_New(2);
    if (pair == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    PyObject *flag = done ? Py_True : Py_False;
    Py_INCREF(flag);
    PyTuple_SET_ITEM(pair, 0, flag);
    PyTuple_SET_ITEM(pair, 1, value); /* steals */
    return pair;
}

/* ``coro.send(None)`` through its method, for an object with no am_send (the rare case):
 * a StopIteration it raises is a return, as in the Python twin. */
static PyObject *
send_by_method(PyObject *coro, PySendResult *how)
{
    PyObject *result = PyObject_CallMethod(coro, "send", "O", Py_None);
    if (result != NULL) {
        *how = PYGEN_NEXT;
        return result;
    }
    if (!PyErr_ExceptionMatches(PyExc_StopIteration)) {
        *how = PYGEN_ERROR;
        return NULL;
    }
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    result = exc == NULL ? NULL : PyObject_GetAttrString(exc, "value");
    Py_XDECREF(type);
    Py_XDECREF(exc);
    Py_XDECREF(tb);
    *how = result == NULL ? PYGEN_ERROR : PYGEN_RETURN;
    return result;
}

static PyObject *
sp_first_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "first_step() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *context = args[0], *coro = args[1];
    if (!PyContext_CheckExact(context)) {
        PyErr_Format(PyExc_TypeError, "first_step() needs a contextvars.Context, got %.100s",
                     Py_TYPE(context)->tp_name);
        return NULL;
    }
    if (PyContext_Enter(context) < 0) /* RuntimeError if it is entered already, as run() */
        return NULL;
    PyObject *result = NULL;
    PySendResult how;
    PyAsyncMethods *am = Py_TYPE(coro)->tp_as_async;
    if (am != NULL && am->am_send != NULL)
        how = PyIter_Send(coro, Py_None, &result);
    else
        result = send_by_method(coro, &how);
    if (PyContext_Exit(context) < 0) {
        Py_XDECREF(result);
        return NULL;
    }
    if (how == PYGEN_ERROR)
        return NULL;
    return done_value(how == PYGEN_RETURN, result);
}

/* ------------------------------------------------------------------ the module */

static PyMethodDef methods[] = {
    {"first_step", (PyCFunction)(void (*)(void))sp_first_step, METH_FASTCALL,
     "first_step($module, context, coro, /)\n--\n\n"
     "remoting._core._receiving._first_step.first_step's compiled fast path: run ``coro`` "
     "to its first suspension in ``context``; return (True, its value) if it finished, "
     "(False, what it yielded) if it suspended."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "remoting._core._receiving._speedups",
    "The receiving side's per-request kernels in C (see remoting/_core/_receiving/_speedups.c).",
    -1, methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
