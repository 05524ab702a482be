/* Decode only a region of a JPEG, optionally at 1/2, 1/4 or 1/8 of its size (libjpeg-turbo).
 *
 * A training crop needs the pixels of its box, not the whole image: libjpeg-turbo can leave out the inverse DCT,
 * upsampling and colour conversion of the columns left and right of the box (jpeg_crop_scanline), of the rows
 * above it (jpeg_skip_scanlines), and stop reading the file after the box's last row. The pixels it returns are
 * those of a whole decode at the same scale, in that region.
 *
 * decode(data, denom, top, left, bottom, right) -> (bytearray rgb, x0, width) | None
 *   data: the JPEG's bytes; denom: 1, 2, 4 or 8; the region in the pixels of the image decoded at 1/denom.
 *   rgb holds (bottom - top) rows of `width` pixels (3 bytes each) starting at column x0 <= left: libjpeg-turbo
 *   widens the columns to whole blocks. None when the region cannot be decoded exactly: libjpeg-turbo reported an
 *   error or a warning (damaged or cut-short data), the image is not 1- or 3-component, or the region falls
 *   outside it. The caller then decodes the whole image its usual way, which gives such files their usual verdict.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>

#define MARGIN 2 /* columns decoded beyond the region on each side */
#define WIDEN (64 + 2 * MARGIN) /* more than the widest block group (4 x 8 pixels at full scale) on each side, and the margins */

struct guard {
    struct jpeg_error_mgr pub;
    jmp_buf escape;
};

static void on_error(j_common_ptr cinfo) {
    struct guard *g = (struct guard *)cinfo->err;
    longjmp(g->escape, 1);
}

static void on_message(j_common_ptr cinfo, int level) {
    if (level < 0) { /* a warning: corrupt or cut-short data, which a whole decode would also meet */
        struct guard *g = (struct guard *)cinfo->err;
        longjmp(g->escape, 1);
    }
}

/* 0 on success; -1 when the region cannot be decoded exactly (see above). */
static int decode_region(const unsigned char *data, unsigned long size, int denom, JDIMENSION top,
                         JDIMENSION left, JDIMENSION bottom, JDIMENSION right, unsigned char *pixels,
                         size_t capacity, JDIMENSION *x0, JDIMENSION *width) {
    struct jpeg_decompress_struct cinfo;
    struct guard err;
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    err.pub.emit_message = on_message;
    jpeg_create_decompress(&cinfo);
    if (setjmp(err.escape)) {
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    jpeg_mem_src(&cinfo, data, size);
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.num_components != 1 && cinfo.num_components != 3) {
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    cinfo.out_color_space = JCS_RGB;
    cinfo.dct_method = JDCT_ISLOW;
    cinfo.scale_num = 1;
    cinfo.scale_denom = (unsigned int)denom;
    jpeg_start_decompress(&cinfo);
    if (right > cinfo.output_width || bottom > cinfo.output_height || left >= right || top >= bottom) {
        jpeg_abort_decompress(&cinfo);
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    /* Chroma upsampling reads one neighbouring chroma sample each side: with a column of margin inside the
     * decoded columns, the region's edge pixels are those of the whole decode. */
    JDIMENSION start = left >= MARGIN ? left - MARGIN : 0;
    JDIMENSION end = right + MARGIN <= cinfo.output_width ? right + MARGIN : cinfo.output_width;
    JDIMENSION xoffset = start, cols = end - start;
    jpeg_crop_scanline(&cinfo, &xoffset, &cols);
    size_t row_bytes = (size_t)cols * 3;
    if (row_bytes * (bottom - top) > capacity) {
        jpeg_abort_decompress(&cinfo);
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    if (top > 0 && jpeg_skip_scanlines(&cinfo, top) != top) {
        longjmp(err.escape, 1);
    }
    while (cinfo.output_scanline < bottom) {
        JSAMPROW row = pixels + row_bytes * (cinfo.output_scanline - top);
        if (jpeg_read_scanlines(&cinfo, &row, 1) != 1) {
            longjmp(err.escape, 1);
        }
    }
    jpeg_abort_decompress(&cinfo); /* the rows below the region are never read */
    jpeg_destroy_decompress(&cinfo);
    *x0 = xoffset;
    *width = cols;
    return 0;
}

static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer data;
    int denom;
    unsigned int top, left, bottom, right;
    if (!PyArg_ParseTuple(args, "y*iIIII", &data, &denom, &top, &left, &bottom, &right)) {
        return NULL;
    }
    if (denom != 1 && denom != 2 && denom != 4 && denom != 8) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "denom must be 1, 2, 4 or 8");
        return NULL;
    }
    if (left >= right || top >= bottom || right - left > 65535 || bottom - top > 65535) {
        PyBuffer_Release(&data);
        Py_RETURN_NONE;
    }
    /* The region widened to whole blocks gains less than WIDEN columns; the bytearray is written once, in place. */
    size_t capacity = (size_t)(right - left + WIDEN) * 3 * (bottom - top);
    PyObject *rgb = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)capacity);
    if (rgb == NULL) {
        PyBuffer_Release(&data);
        return NULL;
    }
    unsigned char *pixels = (unsigned char *)PyByteArray_AS_STRING(rgb);
    JDIMENSION x0 = 0, width = 0;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = decode_region((const unsigned char *)data.buf, (unsigned long)data.len, denom, top, left, bottom,
                           right, pixels, capacity, &x0, &width);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    if (status != 0) {
        Py_DECREF(rgb);
        Py_RETURN_NONE;
    }
    if (PyByteArray_Resize(rgb, (Py_ssize_t)width * 3 * (bottom - top)) != 0) {
        Py_DECREF(rgb);
        return NULL;
    }
    return Py_BuildValue("(NII)", rgb, (unsigned int)x0, (unsigned int)width);
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(data, denom, top, left, bottom, right) -> (bytearray rgb, x0, width) or None: the region's rows of "
     "the JPEG decoded at 1/denom, columns widened to whole blocks from x0."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_jpegregion",
                                    "Region decoding of JPEGs with libjpeg-turbo.", -1, methods};

PyMODINIT_FUNC PyInit__jpegregion(void) { return PyModule_Create(&module); }
