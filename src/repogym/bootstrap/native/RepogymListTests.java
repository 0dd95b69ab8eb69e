// repogym's test lister for Maven projects: reads compiled test classes (class files only, none
// is loaded or run) under every target/test-classes folder below the given roots and prints one
// "REPOGYM-COLLECT-ID <class>#<method>" line per test method Surefire would run with its default
// includes (Test*, *Test, *Tests, *TestCase; @Nested classes of those), then one summary line
// "REPOGYM-COLLECT {...}". Test methods: JUnit 4/5 and TestNG @Test, JUnit 5 @ParameterizedTest,
// @RepeatedTest, @TestFactory, @TestTemplate, annotations of this project annotated with one of
// them, a few well-known ones of extensions (junit-pioneer, JUnit 4 theories, jqwik), and JUnit 3
// test*() methods of TestCase subclasses; inherited ones count for each concrete class.
// A parameterised method counts once: its invocations are only known when it runs.
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Stream;

public final class RepogymListTests {
    static final Set<String> TEST_ANNOTATIONS = new HashSet<>(List.of(
            "org/junit/Test", "org/junit/jupiter/api/Test", "org/junit/jupiter/api/RepeatedTest",
            "org/junit/jupiter/params/ParameterizedTest", "org/junit/jupiter/api/TestFactory",
            "org/junit/jupiter/api/TestTemplate", "org/testng/annotations/Test",
            // well-known extensions meta-annotated with one of those (their jars are not read)
            "org/junitpioneer/jupiter/cartesian/CartesianTest", "org/junitpioneer/jupiter/RetryingTest",
            "org/junit/experimental/theories/Theory", "net/jqwik/api/Property",
            "net/jqwik/api/Example"));
    static final String NESTED = "org/junit/jupiter/api/Nested";
    static final String TESTNG = "org/testng/annotations/Test";
    static final int ACC_PUBLIC = 0x0001, ACC_STATIC = 0x0008, ACC_INTERFACE = 0x0200;
    static final int ACC_ABSTRACT = 0x0400, ACC_ANNOTATION = 0x2000;

    static final class Method {
        final String name, descriptor;
        final int access;
        final Set<String> annotations;

        Method(String name, String descriptor, int access, Set<String> annotations) {
            this.name = name;
            this.descriptor = descriptor;
            this.access = access;
            this.annotations = annotations;
        }
    }

    static final class ClassInfo {
        String name, superName;
        int access;
        List<String> interfaces = new ArrayList<>();
        Set<String> annotations = new HashSet<>();
        List<Method> methods = new ArrayList<>();
    }

    public static void main(String[] args) throws IOException {
        Map<String, ClassInfo> classes = new HashMap<>();
        int unreadable = 0;
        for (String root : args.length > 0 ? args : new String[] {"."}) {
            for (Path dir : testClassDirs(Paths.get(root))) {
                try (Stream<Path> files = Files.walk(dir)) {
                    for (Path file : (Iterable<Path>) files::iterator) {
                        if (!file.toString().endsWith(".class") || !Files.isRegularFile(file)) {
                            continue;
                        }
                        try (InputStream in = Files.newInputStream(file)) {
                            ClassInfo info = read(new DataInputStream(in));
                            classes.putIfAbsent(info.name, info);
                        } catch (IOException | RuntimeException e) {
                            unreadable++;
                        }
                    }
                }
            }
        }
        Set<String> testAnnotations = new HashSet<>(TEST_ANNOTATIONS);
        for (ClassInfo c : classes.values()) {  // meta-annotations of the project itself
            if ((c.access & ACC_ANNOTATION) != 0 && hasAny(c.annotations, TEST_ANNOTATIONS)) {
                testAnnotations.add(c.name);
            }
        }
        TreeMap<String, ClassInfo> sorted = new TreeMap<>(classes);
        int count = 0, withTests = 0;
        for (ClassInfo c : sorted.values()) {
            if (!runs(c, classes)) {
                continue;
            }
            Set<String> tests = testsOf(c, classes, testAnnotations);
            if (!tests.isEmpty()) {
                withTests++;
            }
            for (String t : tests) {
                System.out.println("REPOGYM-COLLECT-ID " + c.name.replace('/', '.') + "#" + t);
                count++;
            }
        }
        System.out.println("REPOGYM-COLLECT {\"collected\": " + count + ", \"classes\": " + withTests
                + ", \"unreadable_class_files\": " + unreadable
                + ", \"how\": \"test methods in compiled test classes (Surefire default includes)\"}");
    }

    static List<Path> testClassDirs(Path root) throws IOException {
        List<Path> found = new ArrayList<>();
        try (Stream<Path> paths = Files.walk(root)) {
            paths.filter(p -> p.endsWith(Paths.get("target", "test-classes")) && Files.isDirectory(p))
                    .filter(p -> !p.toString().contains("/node_modules/"))
                    .sorted()
                    .forEach(found::add);
        }
        return found;
    }

    /** Whether Surefire's default includes select this class (or it is a @Nested class of one). */
    static boolean runs(ClassInfo c, Map<String, ClassInfo> classes) {
        if ((c.access & (ACC_ABSTRACT | ACC_INTERFACE | ACC_ANNOTATION)) != 0) {
            return false;
        }
        String name = c.name;
        int dollar = name.lastIndexOf('$');
        if (dollar >= 0) {
            ClassInfo outer = classes.get(name.substring(0, dollar));
            return c.annotations.contains(NESTED) && outer != null && runs(outer, classes);
        }
        String simple = name.substring(name.lastIndexOf('/') + 1);
        return simple.startsWith("Test") || simple.endsWith("Test") || simple.endsWith("Tests")
                || simple.endsWith("TestCase");
    }

    /** Test method names of a concrete class, its superclasses and interfaces included. */
    static Set<String> testsOf(ClassInfo c, Map<String, ClassInfo> classes, Set<String> annotations) {
        Set<String> seen = new HashSet<>();
        Set<String> tests = new LinkedHashSet<>();
        boolean junit3 = false, testngClass = false;
        List<ClassInfo> chain = new ArrayList<>();
        for (ClassInfo k = c; k != null; k = k.superName == null ? null : classes.get(k.superName)) {
            chain.add(k);
            junit3 |= "junit/framework/TestCase".equals(k.superName);
            testngClass |= k.annotations.contains(TESTNG);
            if (chain.size() > 100) {
                break;
            }
        }
        List<ClassInfo> all = new ArrayList<>(chain);
        for (int i = 0; i < all.size() && i < 1000; i++) {
            for (String iface : all.get(i).interfaces) {
                ClassInfo k = classes.get(iface);
                if (k != null && !all.contains(k)) {
                    all.add(k);
                }
            }
        }
        for (ClassInfo k : all) {
            for (Method m : k.methods) {
                if (!seen.add(m.name + m.descriptor) || m.name.startsWith("<")) {
                    continue;
                }
                boolean isTest = hasAny(m.annotations, annotations);
                boolean plain = (m.access & ACC_PUBLIC) != 0 && (m.access & ACC_STATIC) == 0
                        && m.descriptor.equals("()V");
                if (!isTest && junit3 && plain && m.name.startsWith("test")) {
                    isTest = true;
                }
                if (!isTest && testngClass && (m.access & ACC_PUBLIC) != 0
                        && (m.access & ACC_STATIC) == 0 && m.descriptor.endsWith(")V")
                        && k.interfaces != null && chain.contains(k)) {
                    isTest = true;
                }
                if (isTest) {
                    tests.add(m.name);
                }
            }
        }
        return tests;
    }

    static boolean hasAny(Set<String> have, Set<String> wanted) {
        for (String a : have) {
            if (wanted.contains(a)) {
                return true;
            }
        }
        return false;
    }

    // ----------------------------------------------------------------- class file reading

    static ClassInfo read(DataInputStream in) throws IOException {
        if (in.readInt() != 0xCAFEBABE) {
            throw new IOException("not a class file");
        }
        in.readUnsignedShort();
        in.readUnsignedShort();
        int n = in.readUnsignedShort();
        String[] utf8 = new String[n];
        int[] classRef = new int[n];
        for (int i = 1; i < n; i++) {
            int tag = in.readUnsignedByte();
            switch (tag) {
                case 1: utf8[i] = in.readUTF(); break;
                case 7: classRef[i] = in.readUnsignedShort(); break;
                case 8: case 16: case 19: case 20: in.readUnsignedShort(); break;
                case 3: case 4: case 9: case 10: case 11: case 12: case 17: case 18:
                    in.readInt();
                    break;
                case 5: case 6: in.readLong(); i++; break;
                case 15: in.readUnsignedByte(); in.readUnsignedShort(); break;
                default: throw new IOException("bad constant pool tag " + tag);
            }
        }
        ClassInfo c = new ClassInfo();
        c.access = in.readUnsignedShort();
        c.name = utf8[classRef[in.readUnsignedShort()]];
        int superIndex = in.readUnsignedShort();
        c.superName = superIndex == 0 ? null : utf8[classRef[superIndex]];
        for (int i = in.readUnsignedShort(); i > 0; i--) {
            c.interfaces.add(utf8[classRef[in.readUnsignedShort()]]);
        }
        for (int i = in.readUnsignedShort(); i > 0; i--) {  // fields
            in.readUnsignedShort();
            in.readUnsignedShort();
            in.readUnsignedShort();
            readAttributes(in, utf8, null);
        }
        for (int i = in.readUnsignedShort(); i > 0; i--) {
            int access = in.readUnsignedShort();
            String name = utf8[in.readUnsignedShort()];
            String descriptor = utf8[in.readUnsignedShort()];
            Set<String> annotations = new HashSet<>();
            readAttributes(in, utf8, annotations);
            c.methods.add(new Method(name, descriptor, access, annotations));
        }
        readAttributes(in, utf8, c.annotations);
        return c;
    }

    /** Skips attributes; the types of runtime-visible annotations go into {@code into}. */
    static void readAttributes(DataInputStream in, String[] utf8, Set<String> into) throws IOException {
        for (int i = in.readUnsignedShort(); i > 0; i--) {
            String name = utf8[in.readUnsignedShort()];
            int length = in.readInt();
            if (into != null && "RuntimeVisibleAnnotations".equals(name)) {
                for (int k = in.readUnsignedShort(); k > 0; k--) {
                    String type = utf8[in.readUnsignedShort()];
                    if (type != null && type.startsWith("L") && type.endsWith(";")) {
                        into.add(type.substring(1, type.length() - 1));
                    }
                    skipPairs(in);
                }
            } else {
                in.skipNBytes(length);
            }
        }
    }

    static void skipPairs(DataInputStream in) throws IOException {
        for (int p = in.readUnsignedShort(); p > 0; p--) {
            in.readUnsignedShort();
            skipValue(in);
        }
    }

    static void skipValue(DataInputStream in) throws IOException {
        int tag = in.readUnsignedByte();
        switch (tag) {
            case 'e': in.readUnsignedShort(); in.readUnsignedShort(); break;
            case '@': in.readUnsignedShort(); skipPairs(in); break;
            case '[':
                for (int n = in.readUnsignedShort(); n > 0; n--) {
                    skipValue(in);
                }
                break;
            default: in.readUnsignedShort();
        }
    }
}
