// Fixture of ci/link_check.cmake, never compiled: issue 42 is the planted tracker number.
int planted[2];  // a line with ; and [ ] for the line splitting \
