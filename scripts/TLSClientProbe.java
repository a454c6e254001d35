// A minimal Java TLS client with the JDK's default configuration (the ClientHello every Java
// program sends unless it changes its SSLContext): connects to HOST PORT with SNI NAME, prints
// "PROTOCOL SUITE" and exits. It trusts any certificate (it tests what Java negotiates, not trust).
// Run as a single-file source program: java scripts/TLSClientProbe.java 127.0.0.1 8443 example.test
import java.security.cert.X509Certificate;
import java.util.List;
import javax.net.ssl.*;

public class TLSClientProbe {
    public static void main(String[] args) throws Exception {
        TrustManager[] anyCertificate = { new X509TrustManager() {
            public void checkClientTrusted(X509Certificate[] chain, String type) {}
            public void checkServerTrusted(X509Certificate[] chain, String type) {}
            public X509Certificate[] getAcceptedIssuers() { return new X509Certificate[0]; }
        } };
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(null, anyCertificate, null);
        try (SSLSocket socket = (SSLSocket) context.getSocketFactory().createSocket(args[0], Integer.parseInt(args[1]))) {
            socket.setSoTimeout(10_000);
            SSLParameters parameters = socket.getSSLParameters();
            parameters.setServerNames(List.of(new SNIHostName(args[2])));
            socket.setSSLParameters(parameters);
            socket.startHandshake();
            System.out.println(socket.getSession().getProtocol() + " " + socket.getSession().getCipherSuite());
        }
    }
}
