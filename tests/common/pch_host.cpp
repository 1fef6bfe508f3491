// The target that compiles the suites' shared precompiled <QtTest> (tests/CMakeLists.txt).
int main() { return 0; }
