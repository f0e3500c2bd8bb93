/*
 * check.h - the tiny harness every tests/c/test_*.c program uses: CHECK(cond) counts a
 * pass or prints the failing condition with its place, and check_summary() prints the
 * closing line CI reads ("N passed, N failed") and returns the exit status.
 */
#ifndef USBEAM_TEST_CHECK_H
#define USBEAM_TEST_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (cond) {                                                                  \
            ++passed;                                                                \
        } else {                                                                     \
            ++failed;                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

static inline int check_summary(void)
{
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}

#endif
