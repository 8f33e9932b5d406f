/*
 * The native half of conveyor.mmapsync: cross-process atomics on the mapped state file, the reader's
 * pin (acquire / release as one C call each), open-file-description locks that tell a live reader
 * from a dead one, and the open-addressing table behind FeatureStore.
 *
 * Built with the package (hatch_build.py at the project's root), which passes ATOMICS_SOURCE_SHA256,
 * the hash of this file, so that the loader (_native.py) can refuse a helper built from another
 * version of it; the interface is described for type checkers in _atomics.pyi beside this file.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#if !defined(F_OFD_SETLK)
#error "conveyor.mmapsync needs open file description locks (Linux 3.15 or later)"
#endif

#ifndef ATOMICS_SOURCE_SHA256
#define ATOMICS_SOURCE_SHA256 "unknown"
#endif

#define LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

/* A u64 word at a byte offset of a writable buffer, checked for bounds and alignment. */
static uint64_t *word_at(Py_buffer *view, Py_ssize_t offset) {
    if (offset < 0 || offset % 8 != 0 || offset + 8 > view->len) {
        PyErr_Format(PyExc_ValueError, "offset %zd is not an aligned word inside %zd bytes", offset,
                     view->len);
        return NULL;
    }
    return (uint64_t *)((char *)view->buf + offset);
}

/* ---------------------------------------------------------------- words */

static PyObject *py_load(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    if (nargs != 2) return PyErr_Format(PyExc_TypeError, "load(buffer, offset)");
    Py_ssize_t offset = PyLong_AsSsize_t(args[1]);
    if (offset == -1 && PyErr_Occurred()) return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    uint64_t *word = word_at(&view, offset);
    PyObject *result = word ? PyLong_FromUnsignedLongLong(LOAD(word)) : NULL;
    PyBuffer_Release(&view);
    return result;
}

static PyObject *py_store(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "store(buffer, offset, value)");
    Py_ssize_t offset = PyLong_AsSsize_t(args[1]);
    if (offset == -1 && PyErr_Occurred()) return NULL;
    unsigned long long value = PyLong_AsUnsignedLongLong(args[2]);
    if (value == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) return NULL;
    uint64_t *word = word_at(&view, offset);
    if (word) STORE(word, (uint64_t)value);
    PyBuffer_Release(&view);
    if (!word) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_fetch_add(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "fetch_add(buffer, offset, delta)");
    Py_ssize_t offset = PyLong_AsSsize_t(args[1]);
    if (offset == -1 && PyErr_Occurred()) return NULL;
    unsigned long long delta = PyLong_AsUnsignedLongLong(args[2]);
    if (delta == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) return NULL;
    uint64_t *word = word_at(&view, offset);
    PyObject *result = NULL;
    if (word) {
        result = PyLong_FromUnsignedLongLong(__atomic_fetch_add(word, (uint64_t)delta, __ATOMIC_SEQ_CST));
    }
    PyBuffer_Release(&view);
    return result;
}

/* ---------------------------------------------------------------- locks */

static int ofd_lock(int fd, int cmd, short type, off_t start, off_t len, struct flock *out) {
    struct flock lk;
    memset(&lk, 0, sizeof lk);
    lk.l_type = type;
    lk.l_whence = SEEK_SET;
    lk.l_start = start;
    lk.l_len = len;
    int rc = fcntl(fd, cmd, &lk);
    if (out) *out = lk;
    return rc;
}

static int parse_range(PyObject *const *args, Py_ssize_t nargs, const char *usage, int *fd, off_t *start,
                       off_t *len) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "%s(fd, start, length)", usage);
        return -1;
    }
    *fd = PyLong_AsLong(args[0]);
    *start = PyLong_AsLongLong(args[1]);
    *len = PyLong_AsLongLong(args[2]);
    return PyErr_Occurred() ? -1 : 0;
}

/* Take an exclusive lock on a byte range; False if another open file description holds it. */
static PyObject *py_try_lock(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    int fd;
    off_t start, len;
    if (parse_range(args, nargs, "try_lock", &fd, &start, &len) < 0) return NULL;
    if (ofd_lock(fd, F_OFD_SETLK, F_WRLCK, start, len, NULL) == 0) Py_RETURN_TRUE;
    if (errno == EAGAIN || errno == EACCES) Py_RETURN_FALSE;
    return PyErr_SetFromErrno(PyExc_OSError);
}

/* Take an exclusive lock on a byte range, waiting (without the GIL) for its holder to let go. */
static PyObject *py_lock(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    int fd, rc;
    off_t start, len;
    if (parse_range(args, nargs, "lock", &fd, &start, &len) < 0) return NULL;
    do {
        Py_BEGIN_ALLOW_THREADS rc = ofd_lock(fd, F_OFD_SETLKW, F_WRLCK, start, len, NULL);
        Py_END_ALLOW_THREADS if (rc < 0 && errno == EINTR && PyErr_CheckSignals() < 0) return NULL;
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyObject *py_unlock(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    int fd;
    off_t start, len;
    if (parse_range(args, nargs, "unlock", &fd, &start, &len) < 0) return NULL;
    if (ofd_lock(fd, F_OFD_SETLK, F_UNLCK, start, len, NULL) < 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

/* Whether an open file description other than fd's holds a lock on the range. */
static int range_is_locked(int fd, off_t start, off_t len) {
    struct flock lk;
    if (ofd_lock(fd, F_OFD_GETLK, F_WRLCK, start, len, &lk) < 0) return -1;
    return lk.l_type != F_UNLCK;
}

/*
 * live_pins(state, fd, first_slot, stride, count, pin) -> int
 *
 * How many reader slots hold `pin` and belong to a live reader. A slot's owner keeps an OFD lock on
 * the slot's byte range for as long as it may read; the kernel drops that lock when the owner's last
 * descriptor closes, so a dead reader's slot is unlocked and its stale pin is not counted.
 */
static PyObject *py_live_pins(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    if (nargs != 6) return PyErr_Format(PyExc_TypeError, "live_pins(state, fd, first, stride, count, pin)");
    int fd = PyLong_AsLong(args[1]);
    Py_ssize_t first = PyLong_AsSsize_t(args[2]);
    Py_ssize_t stride = PyLong_AsSsize_t(args[3]);
    Py_ssize_t count = PyLong_AsSsize_t(args[4]);
    unsigned long long pin = PyLong_AsUnsignedLongLong(args[5]);
    if (PyErr_Occurred()) return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) return NULL;
    if (first < 0 || stride < 8 || count < 0 || first + stride * count > view.len) {
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError, "slot table outside the state buffer");
    }
    long live = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t offset = first + i * stride;
        if (LOAD((uint64_t *)((char *)view.buf + offset)) != pin) continue;
        int locked = range_is_locked(fd, offset, stride);
        if (locked < 0) {
            PyBuffer_Release(&view);
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        live += locked;
    }
    PyBuffer_Release(&view);
    return PyLong_FromLong(live);
}

/* ---------------------------------------------------------------- pin */

/*
 * Pin: one reader slot, used as a context manager. __enter__ pins the active data file and returns
 * the object `refresh(word)` built for that version (cached until the version moves); __exit__ unpins.
 * Nested and concurrent (threaded) reads share the pin through a depth count, safe under the GIL.
 */
typedef struct {
    PyObject_HEAD Py_buffer state;
    uint64_t *word;
    uint64_t *publications;
    uint64_t *slot;
    Py_ssize_t depth;
    int refreshing;
    unsigned long refresh_thread;
    uint64_t cached_word;
    uint64_t cached_publications;
    PyObject *cached;
    PyObject *refresh;
} PinObject;

static int Pin_init(PinObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"state", "word", "publications", "slot", "refresh", NULL};
    PyObject *state, *refresh;
    Py_ssize_t word, publications, slot;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OnnnO", kwlist, &state, &word, &publications, &slot,
                                     &refresh))
        return -1;
    if (self->state.obj) {
        PyErr_SetString(PyExc_RuntimeError, "Pin is already initialised");
        return -1;
    }
    if (PyObject_GetBuffer(state, &self->state, PyBUF_WRITABLE) < 0) return -1;
    self->word = word_at(&self->state, word);
    self->publications = word_at(&self->state, publications);
    self->slot = word_at(&self->state, slot);
    if (!self->word || !self->publications || !self->slot) return -1;
    Py_INCREF(refresh);
    self->refresh = refresh;
    return 0;
}

/* A pin still held at deallocation is left as it is: in a forked child this object is a copy of the
   parent's, whose pin is the parent's to clear; in the owner, closing the slot's lock retires it. */
static void Pin_dealloc(PinObject *self) {
    Py_CLEAR(self->cached);
    Py_CLEAR(self->refresh);
    if (self->state.obj) PyBuffer_Release(&self->state);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Pin_enter(PinObject *self, PyObject *unused) {
    if (!self->slot) return PyErr_Format(PyExc_RuntimeError, "Pin is not initialised");
    while (self->refreshing) {
        if (self->refresh_thread == PyThread_get_thread_ident())
            return PyErr_Format(PyExc_RuntimeError, "read() re-entered while building its view");
        Py_BEGIN_ALLOW_THREADS sched_yield();
        Py_END_ALLOW_THREADS
    }
    if (self->depth > 0) {
        self->depth++;
        Py_INCREF(self->cached);
        return self->cached;
    }
    uint64_t word;
    for (;;) {
        word = LOAD(self->word);
        STORE(self->slot, (word & 1) + 1);
        /* The writer swaps before it scans the slots: if the word still reads the same after our pin
           is visible, any writer that later targets this file will see the pin and wait. */
        if (LOAD(self->word) == word) break;
    }
    uint64_t publications = LOAD(self->publications);
    if (self->cached && word == self->cached_word && publications == self->cached_publications) {
        self->depth = 1;
        Py_INCREF(self->cached);
        return self->cached;
    }
    self->refreshing = 1;
    self->refresh_thread = PyThread_get_thread_ident();
    PyObject *arg = PyLong_FromUnsignedLongLong(word);
    PyObject *fresh = arg ? PyObject_CallOneArg(self->refresh, arg) : NULL;
    Py_XDECREF(arg);
    self->refreshing = 0;
    if (!fresh) {
        STORE(self->slot, 0);
        return NULL;
    }
    Py_XSETREF(self->cached, fresh);
    self->cached_word = word;
    self->cached_publications = publications;
    self->depth = 1;
    Py_INCREF(fresh);
    return fresh;
}

static PyObject *Pin_exit(PinObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (self->depth <= 0) return PyErr_Format(PyExc_RuntimeError, "release without a matching acquire");
    if (--self->depth == 0) STORE(self->slot, 0);
    Py_RETURN_NONE;
}

/* Drop the cached view so the next read rebuilds it (after the owner remapped its files). */
static PyObject *Pin_forget(PinObject *self, PyObject *unused) {
    Py_CLEAR(self->cached);
    Py_RETURN_NONE;
}

static PyMethodDef Pin_methods[] = {
    {"__enter__", (PyCFunction)Pin_enter, METH_NOARGS, "Pin the active data file; return its view."},
    {"__exit__", (PyCFunction)(void (*)(void))Pin_exit, METH_FASTCALL, "Unpin when the last read ends."},
    {"forget", (PyCFunction)Pin_forget, METH_NOARGS, "Drop the cached view."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Pin_members[] = {
    {"depth", T_PYSSIZET, offsetof(PinObject, depth), READONLY, "Reads currently held."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject PinType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "conveyor.mmapsync._atomics.Pin",
    .tp_basicsize = sizeof(PinObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Pin_init,
    .tp_dealloc = (destructor)Pin_dealloc,
    .tp_methods = Pin_methods,
    .tp_members = Pin_members,
};

/* ---------------------------------------------------------------- table */

typedef struct {
    uint64_t key;
    uint64_t row; /* row + 1; 0 marks an empty entry */
} Entry;

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static inline int64_t find_row(const Entry *entries, uint64_t mask, uint64_t key) {
    for (uint64_t i = mix64(key) & mask;; i = (i + 1) & mask) {
        const Entry *e = &entries[i];
        if (e->row == 0) return -1;
        if (e->key == key) return (int64_t)(e->row - 1);
    }
}

/* Table: a read-only view of an open-addressing table of (u64 key, u64 row) entries. */
typedef struct {
    PyObject_HEAD Py_buffer entries;
    uint64_t mask;
} TableObject;

static int Table_init(TableObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"entries", NULL};
    PyObject *entries;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O", kwlist, &entries)) return -1;
    if (self->entries.obj) {
        PyErr_SetString(PyExc_RuntimeError, "Table is already initialised");
        return -1;
    }
    if (PyObject_GetBuffer(entries, &self->entries, PyBUF_SIMPLE) < 0) return -1;
    Py_ssize_t capacity = self->entries.len / (Py_ssize_t)sizeof(Entry);
    if (capacity == 0 || (capacity & (capacity - 1)) != 0 ||
        capacity * (Py_ssize_t)sizeof(Entry) != self->entries.len) {
        PyErr_SetString(PyExc_ValueError, "entries must hold a power-of-two number of 16-byte entries");
        return -1;
    }
    self->mask = (uint64_t)capacity - 1;
    return 0;
}

static void Table_dealloc(TableObject *self) {
    if (self->entries.obj) PyBuffer_Release(&self->entries);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Table_find(TableObject *self, PyObject *key) {
    unsigned long long k;
    if (PyLong_CheckExact(key)) {
        k = PyLong_AsUnsignedLongLong(key);
    } else { /* NumPy integers and other __index__ types */
        PyObject *index = PyNumber_Index(key);
        if (!index) return NULL;
        k = PyLong_AsUnsignedLongLong(index);
        Py_DECREF(index);
    }
    if (k == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    return PyLong_FromLongLong(find_row((const Entry *)self->entries.buf, self->mask, (uint64_t)k));
}

/* find_many(keys, rows): rows[i] = row of keys[i] or -1; returns how many keys were missing. */
static PyObject *Table_find_many(TableObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer keys, rows;
    if (nargs != 2) return PyErr_Format(PyExc_TypeError, "find_many(keys, rows)");
    if (PyObject_GetBuffer(args[0], &keys, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &rows, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&keys);
        return NULL;
    }
    Py_ssize_t n = keys.len / 8;
    if (keys.len % 8 != 0 || rows.len != keys.len) {
        PyBuffer_Release(&keys);
        PyBuffer_Release(&rows);
        return PyErr_Format(PyExc_ValueError, "keys and rows must be equal-length 8-byte arrays");
    }
    const uint64_t *k = keys.buf;
    int64_t *r = rows.buf;
    const Entry *entries = self->entries.buf;
    Py_ssize_t missing = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        r[i] = find_row(entries, self->mask, k[i]);
        missing += r[i] < 0;
    }
    PyBuffer_Release(&keys);
    PyBuffer_Release(&rows);
    return PyLong_FromSsize_t(missing);
}

static PyMethodDef Table_methods[] = {
    {"find", (PyCFunction)Table_find, METH_O, "Row of one key, or -1."},
    {"find_many", (PyCFunction)(void (*)(void))Table_find_many, METH_FASTCALL, "Rows of many keys."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "conveyor.mmapsync._atomics.Table",
    .tp_basicsize = sizeof(TableObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Table_init,
    .tp_dealloc = (destructor)Table_dealloc,
    .tp_methods = Table_methods,
};

/* build_table(entries, keys): insert keys[i] with row i into zeroed entries; -1, or the index of the
   first key already present. */
static PyObject *py_build_table(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer entries, keys;
    if (nargs != 2) return PyErr_Format(PyExc_TypeError, "build_table(entries, keys)");
    if (PyObject_GetBuffer(args[0], &entries, PyBUF_WRITABLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &keys, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&entries);
        return NULL;
    }
    Py_ssize_t capacity = entries.len / (Py_ssize_t)sizeof(Entry);
    Py_ssize_t n = keys.len / 8;
    if (capacity == 0 || (capacity & (capacity - 1)) != 0 || keys.len % 8 != 0 || n >= capacity) {
        PyBuffer_Release(&entries);
        PyBuffer_Release(&keys);
        return PyErr_Format(PyExc_ValueError, "need a power-of-two capacity above the key count");
    }
    Entry *e = entries.buf;
    const uint64_t *k = keys.buf;
    uint64_t mask = (uint64_t)capacity - 1;
    Py_ssize_t duplicate = -1;
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t row = 0; row < n; row++) {
        uint64_t i = mix64(k[row]) & mask;
        while (e[i].row != 0 && e[i].key != k[row]) i = (i + 1) & mask;
        if (e[i].row != 0) {
            duplicate = row;
            break;
        }
        e[i].key = k[row];
        e[i].row = (uint64_t)row + 1;
    }
    Py_END_ALLOW_THREADS PyBuffer_Release(&entries);
    PyBuffer_Release(&keys);
    return PyLong_FromSsize_t(duplicate);
}

/* ---------------------------------------------------------------- module */

static PyMethodDef module_methods[] = {
    {"load", (PyCFunction)(void (*)(void))py_load, METH_FASTCALL, "Atomic load of a u64 word."},
    {"store", (PyCFunction)(void (*)(void))py_store, METH_FASTCALL, "Atomic store of a u64 word."},
    {"fetch_add", (PyCFunction)(void (*)(void))py_fetch_add, METH_FASTCALL, "Atomic add; old value."},
    {"try_lock", (PyCFunction)(void (*)(void))py_try_lock, METH_FASTCALL, "Non-blocking OFD lock."},
    {"lock", (PyCFunction)(void (*)(void))py_lock, METH_FASTCALL, "Blocking OFD lock."},
    {"unlock", (PyCFunction)(void (*)(void))py_unlock, METH_FASTCALL, "Release an OFD lock."},
    {"live_pins", (PyCFunction)(void (*)(void))py_live_pins, METH_FASTCALL, "Live readers on a pin."},
    {"build_table", (PyCFunction)(void (*)(void))py_build_table, METH_FASTCALL, "Fill a key table."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_atomics", "Native half of conveyor.mmapsync.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__atomics(void) {
    if (PyType_Ready(&PinType) < 0 || PyType_Ready(&TableType) < 0) return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (!module) return NULL;
    if (PyModule_AddObjectRef(module, "Pin", (PyObject *)&PinType) < 0 ||
        PyModule_AddObjectRef(module, "Table", (PyObject *)&TableType) < 0 ||
        PyModule_AddStringConstant(module, "SOURCE_SHA256", ATOMICS_SOURCE_SHA256) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
