package graylb.interop.apps;

import org.springframework.boot.context.properties.ConfigurationProperties;

/** What a run configures: the application's own kind and the key names of its seed. */
@ConfigurationProperties(prefix = "interop")
public class InteropProperties {
    /** This instance's kind, as it registers it (its metadata under grayKey). */
    private boolean gray;
    /** The request header that says gray. */
    private String grayHeader = "gray";
    /** The instance metadata key of the gray flag. */
    private String grayKey = "gray";
    /** The Kafka record header that says gray. */
    private String recordGrayHeader = "gray";

    public boolean isGray() { return gray; }
    public void setGray(boolean v) { gray = v; }
    public String getGrayHeader() { return grayHeader; }
    public void setGrayHeader(String v) { grayHeader = v; }
    public String getGrayKey() { return grayKey; }
    public void setGrayKey(String v) { grayKey = v; }
    public String getRecordGrayHeader() { return recordGrayHeader; }
    public void setRecordGrayHeader(String v) { recordGrayHeader = v; }
}
